"""`torchmend lint`: graph breaks and recompiles that can be seen in the source, without running anything.

    from torchmend.lint import lint_paths
    result = lint_paths(["."], root=".")
    for f in result.findings:
        print(f.file, f.line, f.rule, f.confidence)

The findings are `torchmend.model.Finding` records with the same rule codes as scan's, `confidence` set
("likely" or "possible"), so `pipeline.propose()` takes them as it takes scan's. Importing this package imports
libcst (the CLI imports it inside the command only).
"""

from torchmend.lint.files import PathNotFound
from torchmend.lint.run import LintResult, lint_paths

__all__ = ["LintResult", "PathNotFound", "lint_paths"]
