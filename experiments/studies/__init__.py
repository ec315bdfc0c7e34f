"""The experiments the lectures and the guide run: over-optimisation, preference methods, GRPO's biases, masking, learning curves, iteration profiles."""
