"""The tiny language model: the GPT, its tokenizer, batched sampling and supervised pretraining."""
