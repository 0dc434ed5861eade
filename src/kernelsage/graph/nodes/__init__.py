"""The agent's nodes, one module each: build the prompt, call the model, parse, return a state update."""
