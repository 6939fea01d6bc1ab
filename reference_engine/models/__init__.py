"""What a model is: its configuration (model_config.py), the Llama-family decoder (llama.py), weight
loading (loader.py) and text in and out (tokenizer.py, detokenizer.py). Import modules by name."""
