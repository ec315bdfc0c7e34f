"""The language-model trainers: PPO with a KL penalty (RLHF), GRPO and RLOO, DPO; their evaluation and plots."""
