"""The training loops: the lifecycle they share, PPO, recurrent PPO, the variants, a batch of seeds."""
