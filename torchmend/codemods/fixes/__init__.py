"""One module per codemod; the registry imports them all. Docstring headings: see torchmend/codemods/base.py."""
