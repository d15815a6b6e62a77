"""The API error table: every constant formats, and every constant the code base names exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from skiff.protocol.errors import BY_ERR_CODE, ERRORS, ApiError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("constant", sorted(ERRORS))
def test_every_constant_formats(constant):
    d = ERRORS[constant]
    values = {p: f"<{p}>" for p in d.placeholders}
    e = ApiError.of(constant, **values)
    assert e.to_dict() == {"code": d.code, "err_code": d.err_code, "description": e.description}
    assert "{" not in e.description or not d.placeholders
    for p in d.placeholders:
        assert f"<{p}>" in e.description


def test_err_codes_are_unique():
    assert len(BY_ERR_CODE) == len(ERRORS)


def test_known_rows():
    assert ApiError.of("JSStreamNotFoundErr").to_dict() == {"code": 404, "err_code": 10059, "description": "stream not found"}
    assert ApiError.of("JSInvalidJSONErr", err="x").description == "invalid JSON: x"
    assert ApiError.of("JSConsumerMaxRequestBatchExceededF", limit=10).description == \
        "consumer max request batch exceeds server limit of 10"


def test_unless_passes_api_errors_through():
    inner = ApiError.of("JSStreamNotFoundErr")
    assert ApiError.unless("JSStreamCreateErrF", inner) is inner
    assert ApiError.unless("JSStreamCreateErrF", "boom").description == "boom"


def test_wrapped_api_error_uses_go_error_text():
    inner = ApiError.of("JSStreamNotFoundErr")
    assert ApiError.of("JSStreamCreateErrF", err=inner).description == "stream not found (10059)"


def test_unknown_constant_is_a_key_error():
    with pytest.raises(KeyError):
        ApiError.of("JSNoSuchThingErr")


def test_every_constant_used_in_the_code_base_exists():
    pattern = re.compile(r"ApiError\.(?:of|unless)\(\s*[\"'](\w+)[\"']")
    missing = []
    for pkg in ("protocol", "server", "storage"):
        for path in (ROOT / pkg).rglob("*.py"):
            for m in pattern.finditer(path.read_text(encoding="utf-8")):
                if m.group(1) not in ERRORS:
                    missing.append(f"{path.relative_to(ROOT)}: {m.group(1)}")
    assert not missing


def test_equality_and_exception():
    e = ApiError.of("JSStreamNotFoundErr")
    assert e == ApiError(404, 10059, "stream not found")
    with pytest.raises(ApiError):
        raise e
