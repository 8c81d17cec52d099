"""Domain models, hashing, the error tree, ports and settings. Imports nothing from other layers."""
