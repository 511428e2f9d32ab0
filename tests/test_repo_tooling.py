"""Tests of the repository tooling: commit-message check and git hooks.

Each test works in a throw-away git repository under tmp_path, isolated from
the user's and the system's git configuration.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "scripts" / "check-commit-messages.sh"
HOOKS = ROOT / ".githooks"

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("bash") is None,
    reason="needs git and bash",
)

# Markers built at run time so this file never holds a real conflict marker.
OURS = "<" * 7
THEIRS = ">" * 7


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") and k != "COMMIT_MSG_ENFORCE_FROM"
    }
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="Tyr Test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="Tyr Test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
    )
    return env


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = _env(path.parent)
        path.mkdir()
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Tyr Test")
        self.git("config", "user.email", "test@example.invalid")
        self.git("config", "commit.gpgsign", "false")

    def run(self, *args: str, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=self.path, env={**self.env, **(env or {})}, input=stdin,
            capture_output=True, text=True, check=False, timeout=30,
        )

    def git(self, *args: str) -> str:
        res = self.run("git", *args)
        assert res.returncode == 0, f"git {args}: {res.stderr}"
        return res.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("commit", "-q", "--allow-empty", "--no-verify", "-m", message)
        return self.git("rev-parse", "HEAD")

    def check(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return self.run("bash", str(CHECK), *args, env=env)

    def use_hooks(self) -> None:
        self.git("config", "core.hooksPath", str(HOOKS))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def test_scripts_are_executable() -> None:
    for path in [CHECK, ROOT / "scripts" / "setup-git-hooks.sh", ROOT / ".ci" / "run",
                 *(HOOKS / h for h in ("pre-commit", "commit-msg", "pre-push"))]:
        assert path.is_file(), path
        assert path.stat().st_mode & stat.S_IXUSR, f"{path} is not executable"


def test_good_subjects_pass(repo: Repo) -> None:
    for subject in [
        "feat: add the MLP example",
        "fix(ir): reject mismatched shapes",
        "docs(examples/gpt): explain the config",
        "perf(exec.lower): fuse adds",
        "refactor(a-b_c): tidy",
        "build: pin torch",
        "Merge branch 'topic' into main",
        'Revert "feat: add the MLP example"',
        "test: " + "x" * 66,  # exactly 72 characters
        "feat: body follows\n\nWith a body.",
    ]:
        repo.commit(subject)
    res = repo.check()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "checked 10 commit(s)" in res.stdout


@pytest.mark.parametrize(
    "subject",
    [
        "added a thing",
        "Feat: capitalised type",
        "feature: unknown type",
        "feat:missing space",
        "feat(IR): upper-case scope",
        "feat(): empty scope",
        "feat: ",
        "fixup! feat: start",
        "feat: " + "x" * 67,  # 73 characters
        "feat: two lines\nno blank line",
    ],
)
def test_bad_subject_is_named(repo: Repo, subject: str) -> None:
    repo.commit("chore: start")
    good = repo.commit("fix: fine")
    bad = repo.commit(subject)
    repo.commit("test: fine again")
    res = repo.check()
    assert res.returncode == 1, res.stdout + res.stderr
    assert bad[:12] in res.stdout
    assert subject.splitlines()[0].strip() in res.stdout
    assert good[:12] not in res.stdout
    assert "1 bad commit message(s)" in res.stderr


def test_subject_length_counts_characters(repo: Repo) -> None:
    repo.commit("docs: " + "é" * 66)  # 72 characters, 138 bytes
    assert repo.check().returncode == 0
    repo.commit("docs: " + "é" * 67)
    res = repo.check()
    assert res.returncode == 1
    assert "73 characters" in res.stdout


def test_commits_before_first_conforming_one_are_grandfathered(repo: Repo) -> None:
    old1 = repo.commit("initial import")
    old2 = repo.commit("wip")
    first = repo.commit("chore: adopt the commit convention")
    repo.commit("feat: something")
    res = repo.check()
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"from {first[:12]}" in res.stdout
    assert old1[:12] not in res.stdout and old2[:12] not in res.stdout

    later = repo.commit("oops")
    res = repo.check()
    assert res.returncode == 1
    assert later[:12] in res.stdout and old2[:12] not in res.stdout


def test_no_conforming_commit_means_nothing_to_enforce(repo: Repo) -> None:
    repo.commit("initial import")
    res = repo.check()
    assert res.returncode == 0
    assert "nothing to enforce" in res.stdout


def test_empty_repository(repo: Repo) -> None:
    res = repo.check()
    assert res.returncode == 0
    assert "no commits" in res.stdout


def test_enforce_from(repo: Repo) -> None:
    repo.commit("feat: conforming early")
    bad = repo.commit("bad early commit")
    start = repo.commit("chore: start enforcing here")
    repo.commit("fix: fine")
    assert repo.check().returncode == 1  # default: from the first conforming commit

    res = repo.check(COMMIT_MSG_ENFORCE_FROM=start)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "checked 2 commit(s)" in res.stdout

    res = repo.check(COMMIT_MSG_ENFORCE_FROM=bad)  # the start commit itself counts
    assert res.returncode == 1
    assert bad[:12] in res.stdout

    res = repo.check(COMMIT_MSG_ENFORCE_FROM="no-such-ref")
    assert res.returncode == 2
    assert "not a commit" in res.stderr


def test_explicit_range(repo: Repo) -> None:
    repo.commit("feat: one")
    base = repo.commit("bad but already pushed")
    repo.commit("fix: two")
    assert repo.check(f"{base}..HEAD").returncode == 0
    bad = repo.commit("also bad")
    res = repo.check(f"{base}..HEAD")
    assert res.returncode == 1
    assert bad[:12] in res.stdout and base[:12] not in res.stdout


def _message_file(repo: Repo, text: str) -> str:
    path = repo.path / ".git" / "COMMIT_EDITMSG"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_commit_msg_hook(repo: Repo) -> None:
    hook = str(HOOKS / "commit-msg")
    good = _message_file(
        repo, "feat(ir): add broadcast\n\nBody.\n# a comment\n# Please enter ...\n")
    assert repo.run(hook, good).returncode == 0

    res = repo.run(hook, _message_file(repo, "added broadcast\n"))
    assert res.returncode == 1
    assert "added broadcast" in res.stderr

    # Comments (the template) and the `commit -v` diff are not the message.
    verbose = ("# feat: not the subject\nfix: real subject\n"
               "# " + "-" * 24 + " >8 " + "-" * 24 + "\ndiff --git a/x b/x\n")
    assert repo.run(hook, _message_file(repo, verbose)).returncode == 0
    assert repo.run(hook, _message_file(repo, "fixup! feat: x\n")).returncode == 0
    assert repo.run(hook, _message_file(repo, "# only a comment\n")).returncode == 1


def test_commit_msg_hook_through_git(repo: Repo) -> None:
    repo.use_hooks()
    assert repo.run("git", "commit", "--allow-empty", "-m", "bad subject").returncode != 0
    assert repo.run("git", "commit", "-q", "--allow-empty", "-m", "chore: ok").returncode == 0


def test_pre_commit_rejects_trailing_whitespace(repo: Repo) -> None:
    repo.use_hooks()
    (repo.path / "a.py").write_text("x = 1   \n", encoding="utf-8")
    repo.git("add", "a.py")
    res = repo.run("git", "commit", "-m", "feat: a")
    assert res.returncode != 0
    assert "a.py" in res.stdout + res.stderr
    assert repo.run("git", "rev-parse", "-q", "--verify", "HEAD").returncode != 0

    (repo.path / "a.py").write_text("x = 1\n", encoding="utf-8")
    repo.git("add", "a.py")
    res = repo.run("git", "commit", "-q", "-m", "feat: a")
    assert res.returncode == 0, res.stdout + res.stderr


def test_pre_commit_rejects_conflict_markers(repo: Repo) -> None:
    repo.use_hooks()
    (repo.path / "ok.txt").write_text("fine\n", encoding="utf-8")
    repo.git("add", "ok.txt")
    repo.git("commit", "-q", "-m", "chore: base")

    text = f"a\n{OURS} HEAD\nb\n=======\nc\n{THEIRS} topic\n"
    (repo.path / "m.txt").write_text(text, encoding="utf-8")
    repo.git("add", "m.txt")
    res = repo.run("git", "commit", "-m", "fix: merge")
    assert res.returncode != 0
    assert "m.txt" in res.stderr and "conflict marker" in res.stderr


def test_pre_commit_finds_markers_outside_the_diff(repo: Repo) -> None:
    # A marker already in the file is caught even when the change is elsewhere.
    (repo.path / "m.txt").write_text(f"{OURS} HEAD\nx\n", encoding="utf-8")
    repo.git("add", "m.txt")
    repo.git("commit", "-q", "--no-verify", "-m", "chore: base")
    repo.use_hooks()
    (repo.path / "m.txt").write_text(f"{OURS} HEAD\nx\ny\n", encoding="utf-8")
    repo.git("add", "m.txt")
    res = repo.run("git", "commit", "-m", "fix: y")
    assert res.returncode != 0
    assert "m.txt:1: conflict marker" in res.stderr


def test_pre_push_checks_pushed_commits(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True,
                   env=_env(tmp_path), capture_output=True)
    repo = Repo(tmp_path / "repo")
    repo.git("remote", "add", "origin", str(remote))
    repo.commit("legacy commit")  # before the convention: grandfathered
    repo.commit("chore: adopt the convention")
    repo.use_hooks()
    res = repo.run("git", "push", "-q", "origin", "main")
    assert res.returncode == 0, res.stderr

    repo.commit("feat: fine")
    bad = repo.commit("not fine")
    res = repo.run("git", "push", "-q", "origin", "main")
    assert res.returncode != 0
    assert bad[:12] in res.stdout + res.stderr

    repo.git("reset", "-q", "--hard", "HEAD~1")
    res = repo.run("git", "push", "-q", "origin", "main")
    assert res.returncode == 0, res.stderr


def test_setup_git_hooks(repo: Repo) -> None:
    # The script configures the repository it runs in; run a copy inside `repo`.
    (repo.path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "setup-git-hooks.sh", repo.path / "scripts")
    shutil.copytree(HOOKS, repo.path / ".githooks")
    res = repo.run("bash", "scripts/setup-git-hooks.sh")
    assert res.returncode == 0, res.stderr
    assert repo.git("config", "core.hooksPath") == ".githooks"
    assert repo.git("config", "commit.template") == ".gitmessage"
