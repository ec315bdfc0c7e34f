"""What a run leaves and how it is read back: checkpoints, the metrics log, the plot, evaluation, recordings."""
