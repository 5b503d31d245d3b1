"""The extension bundle: one folder per bundle, found through `extension.json`."""
