"""The networks: encoders, the actor-critic, its recurrent and stacked forms, the GRU kernel, normalisation."""
