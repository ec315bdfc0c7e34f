"""PPO's algorithm: advantages, losses, rollout storage, action distributions and the update."""
