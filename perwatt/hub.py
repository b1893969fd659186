"""One-click links into the handouts on a JupyterHub: ``python -m perwatt links``.

Each link is an nbgitpuller link. A student who opens it logs in to the hub (if not yet logged in), gets a
server, has the handouts repository cloned into their home folder (or updated, keeping their edits; see
nbgitpuller's automatic merging), and lands in JupyterLab on one handout. The format is nbgitpuller's own,
as its link generator writes it::

    {hub}/hub/user-redirect/git-pull?repo={repo}&urlpath=lab%2Ftree%2F{folder}%2F{notebook}&branch={branch}

with ``targetpath={folder}`` added so that the folder the repository lands in is named explicitly (nbgitpuller
would otherwise name it after the repository URL's last part, ``.git`` included). Every value is URL-encoded.

The handouts are generated, not committed to the book's branch, so the host publishes them where nbgitpuller
can clone them: a branch of their own (``--branch handouts``) or a separate repository, with the notebooks at
its top (``--handouts-path .``, the default) or in a folder. deploy/jupyterhub/README.md shows both.

Standard library only: the host runs this anywhere, and it checks its arguments before printing anything.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import PurePosixPath
from urllib.parse import quote, urlencode, urlsplit

#: ``--interface`` as the book's _config.yml names it (launch_buttons.notebook_interface) -> the URL prefix.
INTERFACES = {"jupyterlab": "lab/tree", "classic": "tree"}
REPO_SCHEMES = ("https", "http", "ssh", "git", "file")
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)\S+$")  # git@github.com:org/repo.git
_BAD_REF = re.compile(r"(^[-/.])|(\.\.)|(//)|(@\{)|([\x00-\x20~^:?*\[\\\x7f])|([/.]$)|(\.lock$)")


class LinkError(ValueError):
    """A parameter cannot make a working link; the message names the parameter and says what to give."""


def check_hub(url: str) -> str:
    """The hub's address as a base ending in ``/``: http(s), a host, optionally a path the hub is served under."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LinkError(f"--hub {url!r} is not a web address; give the address students open, "
                        "e.g. https://hub.example.org")
    if parts.query or parts.fragment:
        raise LinkError(f"--hub {url!r} has a query or fragment; give only the hub's address, e.g. https://hub.example.org")
    path = parts.path.rstrip("/")
    if path.split("/")[-1] in ("hub", "lab", "tree") or "/user/" in f"{path}/":
        raise LinkError(f"--hub {url!r} points inside the hub; give its address without /hub, /user or /lab, "
                        f"e.g. {parts.scheme}://{parts.netloc}{path.rsplit('/', 1)[0]}")
    return f"{parts.scheme}://{parts.netloc}{quote(path, safe='/%')}/"


def check_repo(url: str) -> str:
    """A git URL that ``git clone`` (and so nbgitpuller) accepts: https, ssh, git, file, or user@host:path."""
    url = url.strip()
    if _SCP_LIKE.match(url):
        return url
    parts = urlsplit(url)
    if parts.scheme not in REPO_SCHEMES or (parts.scheme != "file" and not parts.hostname) or not repo_folder_or_none(url):
        raise LinkError(f"--repo {url!r} is not a git repository URL; give one `git clone` accepts, "
                        "e.g. https://github.com/ORG/perwatt-handouts.git")
    if any(ch.isspace() for ch in url) or parts.query or parts.fragment:
        raise LinkError(f"--repo {url!r} has spaces, a query or a fragment; give the repository's clone URL")
    return url


def check_branch(branch: str | None) -> str | None:
    """A branch name git accepts, or None (nbgitpuller then uses the repository's default branch)."""
    if branch is None:
        return None
    if not branch or _BAD_REF.search(branch):
        raise LinkError(f"--branch {branch!r} is not a valid git branch name (no spaces, '..', '~^:?*[\\' "
                        "or a leading '-')")
    return branch


def check_path(path: str) -> str:
    """Where the notebooks sit inside the repository: a relative POSIX path, '' for its top."""
    pure = PurePosixPath(path.strip() or ".")
    if pure.is_absolute() or ".." in pure.parts or "\\" in path:
        raise LinkError(f"--handouts-path {path!r} must be a folder inside the repository, relative to its top "
                        "and with forward slashes, e.g. . or handouts")
    return "" if str(pure) == "." else str(pure)


def repo_folder_or_none(repo: str) -> str | None:
    name = re.split(r"[/:]", repo.rstrip("/"))[-1]
    name = name[:-4] if name.endswith(".git") else name
    return name or None


def repo_folder(repo: str) -> str:
    """The folder the repository lands in, in the student's home: its name without ``.git``."""
    name = repo_folder_or_none(repo)
    if name is None:
        raise LinkError(f"--repo {repo!r} does not end in a repository name")
    return name


def link(hub: str, repo: str, notebook: str | None = None, branch: str | None = None, path: str = "",
         interface: str = "jupyterlab", folder: str | None = None) -> str:
    """The nbgitpuller link that pulls ``repo`` and opens ``notebook`` (or, with None, the handouts' folder)."""
    base, repo, branch, path = check_hub(hub), check_repo(repo), check_branch(branch), check_path(path)
    if interface not in INTERFACES:
        raise LinkError(f"--interface {interface!r}: choose one of {', '.join(INTERFACES)}")
    folder = folder or repo_folder(repo)
    target = "/".join(p for p in (folder, path, notebook) if p)
    query = [("repo", repo), ("urlpath", f"{INTERFACES[interface]}/{quote(target)}")]
    if branch:
        query.append(("branch", branch))
    query.append(("targetpath", folder))
    return f"{base}hub/user-redirect/git-pull?{urlencode(query)}"


def links(hub: str, repo: str, notebooks: list[str], branch: str | None = None, path: str = "",
          interface: str = "jupyterlab") -> list[tuple[str, str]]:
    """(name, link) for the handouts' folder (named ``all``) and then each notebook, in the order given."""
    return [("all", link(hub, repo, None, branch, path, interface))] + [
        (name, link(hub, repo, name, branch, path, interface)) for name in notebooks]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hub", required=True, help="the hub's address, as students open it (https://hub.example.org)")
    parser.add_argument("--repo", required=True, help="the git repository holding the generated handouts (clone URL)")
    parser.add_argument("--branch", default=None, help="its branch with the handouts (default: the repository's default)")
    parser.add_argument("--handouts-path", default=".", help="the handouts' folder inside the repository (default: its top)")
    parser.add_argument("--interface", default="jupyterlab", choices=sorted(INTERFACES),
                        help="open in JupyterLab (default) or the classic notebook view")


def run(args: argparse.Namespace, notebooks: list[str]) -> int:
    """Print one tab-separated ``name<TAB>link`` line per handout; exit 2 with a clear message on a bad parameter."""
    try:
        rows = links(args.hub, args.repo, notebooks, args.branch, args.handouts_path, args.interface)
    except LinkError as err:
        print(f"links: {err}", file=sys.stderr)
        return 2
    for name, url in rows:
        print(f"{name}\t{url}")
    return 0
