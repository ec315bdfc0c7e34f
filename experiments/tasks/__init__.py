"""Language-model tasks the commands and studies train on: the food task, the two-choice task, the preference rater."""
