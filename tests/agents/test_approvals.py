"""Approval policy: the mode table, commands refused in every mode, and what is deliberately not refused."""

from __future__ import annotations

import pytest

from agents.approvals import Verdict, always_refused, decide, evaluate
from agents.contract import ApprovalMode
from agents.tools import registry
from agents.tools.base import Risk


@pytest.mark.parametrize(
    ("risk", "mode", "expected"),
    [
        ("safe", "ask", "allow"),
        ("safe", "full_access", "allow"),
        ("safe", "read_only", "allow"),
        ("dangerous", "ask", "ask"),
        ("dangerous", "full_access", "allow"),
        ("dangerous", "read_only", "refuse"),
    ],
)
def test_decide_maps_risk_and_mode(risk: Risk, mode: ApprovalMode, expected: str) -> None:
    assert decide(risk=risk, mode=mode) == expected


@pytest.mark.parametrize(
    "command",
    [
        # rm -rf / and its variants
        "rm -rf /",
        "rm -fr /",
        "rm -r -f /",
        "rm --recursive --force /",
        "rm -Rf /*",
        "rm -rf //",
        "rm -rf /.",
        'rm -rf "/"',
        "rm -rf -- /",
        "rm -rf --no-preserve-root /",
        "rm --no-preserve-root -rf /tmp/x",
        "rm -rf ~",
        "rm -rf ~/",
        "rm -rf ~/*",
        "rm -rf $HOME",
        "rm -rf ${HOME}/*",
        "rm -rf /usr/",
        "rm -rf /etc",
        "/bin/rm -rf /",
        r"\rm -rf /",
        # hidden in chains, wrappers, subshells and substitutions
        "ls; rm -rf /",
        "cd /tmp && rm -rf /",
        "false || rm -rf /",
        "cat x | rm -rf /",
        "ls\nrm -rf /",
        "(rm -rf /)",
        "{ rm -rf /; }",
        "sudo rm -rf /",
        "sudo -u root rm -rf /",
        "env FOO=1 rm -rf /",
        "FOO=1 rm -rf /",
        "nohup rm -rf / &",
        "timeout 5 rm -rf /",
        "if true; then rm -rf /; fi",
        'sh -c "rm -rf /"',
        "bash -lc 'rm -rf /'",
        "eval rm -rf /",
        'echo "$(rm -rf /)"',
        "echo `rm -rf /`",
        "diff <(rm -rf /) x",
        # filesystems and devices
        "mkfs /dev/sda1",
        "mkfs.ext4 /dev/sda1",
        "sudo mkfs.xfs -f /dev/nvme0n1p1",
        "mke2fs /dev/sdb",
        "mkswap /dev/sda2",
        "wipefs -a /dev/sda",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "dd if=image.iso of=/dev/mmcblk0",
        "echo hi > /dev/sda",
        "cat image >> /dev/nvme0n1",
        "cat image 1>/dev/sdb1",
        "cat image | tee /dev/sda",
        "cp image /dev/sdc",
        "shred /dev/sda",
        # fork bombs
        ":(){ :|:& };:",
        ":(){ :|: & }; :",
        "bomb() { bomb | bomb & }; bomb",
        # power
        "shutdown -h now",
        "sudo reboot",
        "halt",
        "poweroff",
        "init 0",
        "systemctl reboot",
        # permissions and moves of whole trees
        "chmod -R 777 /",
        "chmod -R 000 /etc",
        "chown -R nobody /",
        "chgrp -R users /usr",
        "mv / /tmp/x",
        "mv ~ /dev/null",
        "find / -delete",
        "find / -exec rm -rf {} +",
        # killing everything
        "kill -9 -1",
        "kill -- -1",
        "kill -s KILL -1",
        "kill 1",
    ],
)
def test_catastrophic_commands_are_always_refused(command: str) -> None:
    reason = always_refused(command)
    assert reason is not None and len(reason) > 10


@pytest.mark.parametrize(
    "command",
    [
        # Decision: text that merely mentions a command is data, not a command. Quoted strings
        # are single words to the shell, so these are allowed (and still need approval in ask mode).
        'echo "rm -rf /"',
        "echo rm -rf /",
        "printf '%s\\n' 'mkfs.ext4 /dev/sda'",
        "grep -r mkfs docs/",
        "git commit -m 'reboot the parser'",
        "man shutdown",
        "echo a # rm -rf /",
        "ls `pwd`",
        # ordinary work inside the workspace
        "rm -rf ./build",
        "rm -rf build/ dist/",
        "rm -rf *",
        "rm -r /tmp/agentsite-scratch",
        "rm /etc/motd",
        "chmod 644 notes.txt",
        "chmod -R u+w src",
        "dd if=/dev/zero of=disk.img bs=1M count=10",
        "dd if=/dev/urandom of=/dev/null count=1",
        "make 2>/dev/null",
        "echo x>/dev/null",
        "cmd > out.log 2>&1",
        "cat /dev/sda | head",
        "kill 1234",
        "kill -9 %1",
        "find . -name '*.pyc' -delete",
        "python3 -c 'print(1)'",
        "sh -c 'ls -la'",
        "ls -la && echo done",
    ],
)
def test_ordinary_commands_and_mentions_are_not_refused(command: str) -> None:
    assert always_refused(command) is None


def test_unbalanced_quotes_are_still_checked() -> None:
    assert always_refused('rm -rf / "') is not None


def test_evaluate_refuses_always_refused_commands_even_with_full_access() -> None:
    """The sentence is the tool result the model reads."""
    tool, params = registry.parse("shell", {"command": "sudo rm -rf /"})
    for mode in ("ask", "full_access", "read_only"):
        assert evaluate(tool, params, mode) == Verdict(
            "refuse", "Refused in every approval mode: 'rm -r /' would delete a system or home folder."
        )


@pytest.mark.parametrize("name", ["shell", "write_file"])
def test_evaluate_applies_the_mode_to_dangerous_tools(name: str) -> None:
    """Read-only refuses with the sentence the model reads; ask carries the question the user reads."""
    arguments = {"command": "ls"} if name == "shell" else {"path": "a", "content": ""}
    tool, params = registry.parse(name, arguments)
    assert evaluate(tool, params, "full_access") == Verdict("allow")
    assert evaluate(tool, params, "ask") == Verdict(
        "ask", f"'{name}' is a dangerous tool and needs your confirmation."
    )
    assert evaluate(tool, params, "read_only") == Verdict(
        "refuse",
        f"Refused: read-only mode. '{name}' is a dangerous tool and this message may only use safe tools.",
    )


@pytest.mark.parametrize("mode", ["ask", "full_access", "read_only"])
def test_evaluate_allows_safe_tools_in_every_mode(mode: ApprovalMode) -> None:
    tool, params = registry.parse("read_file", {"path": "notes.txt"})
    assert evaluate(tool, params, mode) == Verdict("allow")
