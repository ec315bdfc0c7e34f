"""PPO from scratch: the core library."""
