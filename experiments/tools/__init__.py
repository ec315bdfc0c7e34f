"""Tools for the project's documents: the README's measured blocks, rendered from their records."""
