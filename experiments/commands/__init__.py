"""The commands (ppo-train, ppo-eval, ppo-plot, ppo-pretrain-lm, ppo-rlhf, ppo-dpo) and what they share: flags, presets, run folders, sweeps, statistics, the timing of a trainer's phases."""
