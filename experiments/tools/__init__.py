"""Tools for the project's documents: the measured blocks of the README and the book, rendered from their
records, and the lectures' reading times (reading_times)."""
