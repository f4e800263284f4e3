"""PDFs built in tests: a tiny hand-written one with a text layer per page (or none), and an encrypted copy."""

from __future__ import annotations

import io


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[str | None]) -> bytes:
    """A PDF of one page per entry: its text drawn in Helvetica, or (None) a page with no text layer, as a
    scanned page has none."""
    n = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({_escaped(text)}) Tj ET" if text is not None else "0 0 m 10 10 l S"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def encrypted_pdf(pages: list[str | None], password: str = "secret") -> bytes:
    """`make_pdf(pages)` encrypted with a user password (RC4, which pypdf writes and reads on its own)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(pages))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _written(bodies: list[bytes]) -> bytes:
    """A PDF of these numbered objects (object 1 the catalog), with its cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(bodies, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(bodies) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(bodies) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def _stream(data: bytes, extra: str = "") -> bytes:
    """A Flate-compressed stream object's body."""
    import zlib

    packed = zlib.compress(data, 9)
    return (
        f"<< /Length {len(packed)} /Filter /FlateDecode {extra}>>\nstream\n".encode()
        + packed
        + b"\nendstream"
    )


def shared_stream_pdf(pages: int, shows: int, *, shared: bool = True) -> bytes:
    """A PDF of `pages` pages that all name one Flate-compressed content stream of `shows` empty text-show
    operators (`shared=False`: each page its own copy): a few KB whose pages a reader that parses each page's
    content again works on `pages` times."""
    content = _stream(b"BT /F1 12 Tf 72 720 Td " + b"() Tj " * shows + b"ET")
    streams = 1 if shared else pages
    first_page = 4 + streams
    kids = " ".join(f"{first_page + i} 0 R" for i in range(pages))
    bodies = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    bodies += [content] * streams
    for i in range(pages):
        bodies.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                f"/Contents {4 + (0 if shared else i)} 0 R >>"
            ).encode()
        )
    return _written(bodies)


def shared_form_pdf(pages: int, form_bytes: int) -> bytes:
    """A PDF of `pages` pages whose short content draws one form XObject they all name, `form_bytes` of
    content decoded (a form nested in it, drawn by it, is 10 bytes more)."""
    inner = _stream(b"0 0 m 1 1 l", "/Type /XObject /Subtype /Form /BBox [0 0 9 9] ")
    body = b"/Fm1 Do " + b" " * (form_bytes - len(b"/Fm1 Do "))
    form = _stream(
        body, "/Type /XObject /Subtype /Form /BBox [0 0 9 9] /Resources << /XObject << /Fm1 5 0 R >> >> "
    )
    kids = " ".join(f"{7 + i} 0 R" for i in range(pages))
    bodies = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        form,
        inner,
        _stream(b"/Fm0 Do"),
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /XObject << /Fm0 4 0 R >> >> /Contents 6 0 R >>"
    )
    return _written(bodies + [page] * pages)
