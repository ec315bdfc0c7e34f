"""The experiments the lectures and README run: over-optimisation, preference methods, GRPO's biases, masking, learning curves, iteration profiles."""
