"""PPO's pieces for token generation: rollouts, per-token rewards, the KL penalty and its coefficient, tasks, the reward model."""
