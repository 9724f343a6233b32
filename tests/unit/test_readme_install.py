"""What a new user installs from the README: the extra its FastAPI example needs, the npm packages the tests need."""

import pathlib
import re
import tomllib

from support.docs import ROOT, all_text, section


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(project["optional-dependencies"])


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower() for req in requirements}


def test_asgi_extra_names_fastapi_and_uvicorn() -> None:
    assert {"fastapi", "uvicorn"} <= _names(_extras()["asgi"])


def test_readme_names_the_asgi_extra_in_your_own_model() -> None:
    assert "pip install -e '.[asgi]'" in section("Your own model: `tokenwire.asgi`")


# A skip message's install command: npm install, the .ci/node prefix, then one or more name@major.
NPM = re.compile(r"npm install --prefix \.ci/node((?: [a-z0-9@][\w@./-]*@\d+)+)")


def test_readme_npm_step_names_every_package_the_skips_name() -> None:
    wanted: set[str] = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):          # the tests, in every folder, and support/
        if path.name == pathlib.Path(__file__).name:
            continue
        for match in NPM.finditer(path.read_text()):
            wanted.update(match.group(1).split())
    assert {"axe-core@4", "eventsource@2"} <= wanted       # the skip messages still say how to install them
    commands = [set(m.group(1).split()) for m in NPM.finditer(all_text())]
    assert any(wanted <= named for named in commands), (wanted, commands)
