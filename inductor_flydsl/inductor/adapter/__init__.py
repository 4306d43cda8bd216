"""The adapter to TorchInductor: its internals, the patches, the plugin's state and a choice's."""
