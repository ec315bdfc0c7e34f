"""Solutions to the exercises: the same functions as lectures/exercises/lecture_NN.py, implemented."""
