"""Source files as Python reads them: decoded as Python decodes them (PEP 263: the BOM or the coding line, else
UTF-8) and encoded back the same way, the BOM kept, newlines never translated, so the bytes outside an edit do
not change; and check_python(), whether Python itself accepts a file (strict decoding, then compile())."""

from __future__ import annotations

import codecs
import io
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class NotSource(OSError):
    """Python itself rejects the file: an undecodable byte, a bad coding line, or a syntax error."""


@dataclass(frozen=True)
class Encoding:
    codec: str = "utf-8"  # from the coding line (PEP 263), else utf-8
    bom: bool = False  # the file starts with a UTF-8 BOM (kept on writing)

    def encode(self, text: str) -> bytes:
        return (codecs.BOM_UTF8 if self.bom else b"") + text.encode(self.codec)


def decode(data: bytes, path: str) -> tuple[str, Encoding]:
    """The text of a source (BOM left out) and how it is encoded, as Python decodes it; raises NotSource."""
    try:
        codec, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:  # a bad coding line, or a first line that is not UTF-8: name the byte if it is that
        bad_cookie: NotSource | None = NotSource(f"{path}: {e.msg}")
        codec = "utf-8"
    else:
        bad_cookie = None
    bom = data.startswith(codecs.BOM_UTF8)
    body = data[len(codecs.BOM_UTF8) :] if bom else data
    codec = "utf-8" if codec == "utf-8-sig" else codec
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as e:
        start = e.start + (len(codecs.BOM_UTF8) if bom else 0)
        line = data.count(b"\n", 0, start) + 1
        why = "no coding line (PEP 263) declares another encoding" if codec == "utf-8" else "its coding line says so"
        raise NotSource(
            f"{path}: byte 0x{data[start]:02x} on line {line} (offset {start}) is not valid {codec}, and {why}"
        ) from e
    if bad_cookie is not None:
        raise bad_cookie
    return text, Encoding(codec, bom)


def source_encoding(path: str) -> Encoding:
    """How the file on disk is encoded (UTF-8 without BOM when it cannot be read)."""
    try:
        return decode(Path(path).read_bytes(), path)[1]
    except OSError:
        return Encoding()


def encode_diff(diff: Callable[[str, str], str], before: str, after: str, encoding: Encoding) -> bytes:
    """A file's unified diff (`diff(before, after)`) in the file's own encoding, its BOM on line 1 of both
    sides, so that `git apply` and `patch` match the bytes on disk (a character the encoding lacks: UTF-8)."""
    bom = "\ufeff" if encoding.bom else ""
    text = diff(bom + before, bom + after)
    try:
        return text.encode(encoding.codec)
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def read_source(path: str) -> str:
    """A source file's text exactly as on disk (newlines untranslated, BOM left out), decoded as Python does."""
    return decode(Path(path).read_bytes(), path)[0]


def check_python(path: str) -> None:
    """Raise NotSource when Python itself would reject the file as a script: an undecodable byte (even in a
    comment, which compile() of bytes lets pass), a bad coding line, or a syntax error."""
    data = Path(path).read_bytes()
    decode(data, path)
    try:
        compile(data, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise NotSource(f"{path}:{e.lineno}: {e.msg}") from e
    except ValueError as e:  # null bytes
        raise NotSource(f"{path}: {e}") from e
