"""torchmend: find and fix what stops torch.compile from paying off."""

__version__ = "0.1.0"
