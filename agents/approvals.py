"""Approval policy (docs/protocol.md §3.5): what runs, what asks the user, what is refused.

:func:`evaluate` is the one entry the turn calls: it answers allow/ask/refuse for a validated
call and carries the exact sentence the model (a refusal) or the user (a confirmation) reads.
It puts two questions together that are kept apart below: :func:`decide` maps a call's risk and
the message's approval mode to allow/ask/refuse; :func:`always_refused` names shell commands
that are refused in every mode because no confirmation should ever let them through.

``always_refused`` parses the command the way the shell would split it (quotes, ``;``,
``&&``, ``||``, pipes, subshells, ``$(...)``) and judges each simple command by its program
and arguments, so that ``echo "rm -rf /"`` or ``grep mkfs notes.txt`` (data, not commands) are
not refused while ``sudo rm -rf /``, ``ls; rm -fr /*`` or ``sh -c 'mkfs.ext4 /dev/sda1'`` are.
It is a guard rail against catastrophic mistakes, not a sandbox: dangerous commands still
need approval, and the shell runs with the server user's rights in the workspace.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agents.contract import ApprovalMode
    from agents.tools.base import Risk, Tool

Decision = Literal["allow", "ask", "refuse"]

# Paths whose recursive removal, permission change or move would wreck the machine or the home folder.
PROTECTED_PATHS = frozenset(
    {"/", "~"}
    | {
        f"/{name}"
        for name in (
            "bin boot dev etc home lib lib32 lib64 media mnt opt proc root run sbin snap srv sys usr var"
        ).split()
    }
)
_RAW_DEVICE = re.compile(
    r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|dm-|md|loop|sr|disk/|mapper/|mem$|kmem$|port$)",
)
_HARMLESS_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_SEPARATORS = frozenset({"{", "}", "!", "`", "\n"})
_OPERATOR_CHARS = frozenset(";&|()<>\n")
# Characters the shell keeps inside a word that shlex would otherwise cut it at.
_EXTRA_WORD_CHARS = "$@{}%+,:^[]!\\"
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})
_POWER_COMMANDS = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_FORK_BOMB = re.compile(
    r"(?:function\s+)?(?P<name>[^\s(){}|&;<>]+)\s*(?:\(\s*\))?\s*\{[^}]*"
    r"(?P=name)\s*\|\s*&?\s*(?P=name)"
)
# Wrappers that run their arguments as a command: name -> options that take a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "nohup": frozenset(),
    "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "time": frozenset({"-f", "-o"}),
    "timeout": frozenset({"-s", "-k"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "busybox": frozenset(),
    "xargs": frozenset({"-I", "-n", "-P", "-d", "-E", "-L", "-s", "-a"}),
    "setsid": frozenset(),
    "unbuffer": frozenset(),
    # Shell keywords that may precede a command in a list.
    **{keyword: frozenset() for keyword in ("if", "then", "else", "elif", "do", "while", "until")},
}
_MAX_DEPTH = 5


@dataclass(frozen=True)
class Verdict:
    """The policy's answer for one call, with the sentence the user and the model see.

    The turn shows ``reason`` as it is: the tool result of a refused call, the question of a
    confirmation. A call that runs has nothing to explain (empty reason).
    """

    decision: Decision
    reason: str = ""


def decide(*, risk: Risk, mode: ApprovalMode) -> Decision:
    """Safe calls always run; dangerous ones ask, run (full access) or are refused (read only)."""
    if risk == "safe" or mode == "full_access":
        return "allow"
    if mode == "read_only":
        return "refuse"
    return "ask"


def evaluate(tool: Tool, params: BaseModel, mode: ApprovalMode) -> Verdict:
    """The whole policy for one validated call: always-refused first, then :func:`decide`."""
    refusal = tool.refusal_reason(params)
    if refusal is not None:
        return Verdict("refuse", f"Refused in every approval mode: {refusal}.")
    decision = decide(risk=tool.risk_for(params), mode=mode)
    if decision == "refuse":
        return Verdict(
            "refuse",
            f"Refused: read-only mode. '{tool.name}' is a dangerous tool and this message may "
            "only use safe tools.",
        )
    if decision == "ask":
        return Verdict("ask", f"'{tool.name}' is a dangerous tool and needs your confirmation.")
    return Verdict("allow")


def decision_entry(asked: dict[str, Any], outcome: Any, mode: str) -> tuple[str, dict[str, Any]]:
    """An approval decision as the audit trail keeps it (docs/protocol.md §6.4): a summary, and what was
    asked (`kind`, `tool`, `arguments`, `command`, `reason`, an ACP runner's `options`; never the preview)
    with the answer (`outcome`: `approved`, `by` — user, timeout, cancel, policy — and `option_id`)."""
    details = {key: value for key, value in asked.items() if key != "preview"}
    details.update(approved=outcome.approved, by=outcome.by, approval_mode=mode)
    if outcome.option_id is not None:
        details["option_id"] = outcome.option_id
    verdict = "approved" if outcome.approved else "refused"
    return f"{asked.get('tool')} {verdict} by {outcome.by}", details


def always_refused(command: str) -> str | None:
    """Why ``command`` must never run, whatever the approval mode; None when it may (subject to approval)."""
    return _check(command, depth=0)


def _check(command: str, *, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return "the command nests shells too deeply to be checked"
    if _FORK_BOMB.search(command):
        return "it looks like a fork bomb"
    for simple in _simple_commands(command):
        reason = _check_simple(simple, depth=depth)
        if reason is not None:
            return reason
    return None


def _tokens(command: str) -> list[str]:
    """Shell words and operators; unbalanced quotes fall back to a rough split (still checked)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace = " \t\r"  # a newline separates commands: keep it as a token
    lexer.commenters = "#"
    lexer.wordchars += _EXTRA_WORD_CHARS
    try:
        return list(lexer)
    except ValueError:
        return re.findall(r"[;&|()<>\n]+|[^\s;&|()<>'\"]+", command)


def _operator_kind(token: str) -> str | None:
    """'separator' (``;``, ``&&``, ``|``, ``(``, ``<(``...), 'redirect' (``>``, ``2>&``...) or None."""
    if token in _SEPARATORS or (set(token) & set("()") and set(token) <= _OPERATOR_CHARS):
        return "separator"
    if not token or not set(token) <= _OPERATOR_CHARS:
        return None
    if set(token) & set("<>"):
        return "redirect"
    return "separator"


def _simple_commands(command: str) -> list[list[str]]:
    """Split into simple commands (argv plus redirections) at every list, pipe and grouping operator."""
    commands: list[list[str]] = [[]]
    for token in _tokens(command):
        if _operator_kind(token) == "separator":
            commands.append([])
        else:
            commands[-1].append(token)
    return [argv for argv in commands if argv]


def _check_simple(words: list[str], *, depth: int) -> str | None:
    for word in words:
        inner = _substitutions(word)
        if inner and (reason := _check(inner, depth=depth + 1)):
            return reason
    argv, targets = _split_redirections(words)
    for target in targets:
        if _is_raw_device(target):
            return f"it writes to the raw device {target}"
    argv = _unwrap(argv)
    if not argv:
        return None
    return _check_program(argv, depth=depth)


def _substitutions(word: str) -> str:
    """Command substitutions inside a word (also inside double quotes, where the shell still runs them)."""
    if "$(" not in word and "`" not in word:
        return ""
    return word.replace("$(", " ; ").replace("`", " ; ").replace(")", " ; ")


def _split_redirections(words: list[str]) -> tuple[list[str], list[str]]:
    """Separate argv from the targets of output redirections (``> /dev/sda``, ``2>>log``)."""
    argv: list[str] = []
    targets: list[str] = []
    operator: str | None = None
    for word in words:
        if operator is not None:
            if ">" in operator:
                targets.append(word)
            operator = None
        elif _operator_kind(word) == "redirect":
            operator = word
            if argv and argv[-1].isdigit():
                argv.pop()  # the fd number of ``2>``: tokenised apart, but not an argument
        else:
            argv.append(word)
    return argv, targets


def _unwrap(argv: list[str]) -> list[str]:
    """Strip ``VAR=value`` prefixes, keywords and wrappers (sudo, env, timeout...) to find the program."""
    for _ in range(_MAX_DEPTH * 4):
        while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
            argv = argv[1:]
        if not argv:
            return argv
        program = posixpath.basename(argv[0])
        if program not in _WRAPPERS:
            return argv
        argv = _skip_options(argv[1:], _WRAPPERS[program])
        if program == "timeout" and argv:
            argv = argv[1:]  # the duration
    return argv


def _skip_options(args: list[str], takes_value: frozenset[str]) -> list[str]:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        if args[index] == "--":
            return args[index + 1 :]
        index += 2 if args[index] in takes_value else 1
    return args[index:]


def _check_program(argv: list[str], *, depth: int) -> str | None:
    program = posixpath.basename(argv[0])
    args = argv[1:]
    if program in _SHELLS or program == "eval":
        return _check_shell_invocation(program, args, depth=depth)
    if program in _POWER_COMMANDS:
        return f"'{program}' would stop or restart the machine"
    if program in {"init", "telinit"} and set(args) & {"0", "6"}:
        return f"'{program} {' '.join(args)}' would stop or restart the machine"
    if program == "systemctl" and set(args) & {"poweroff", "reboot", "halt", "kexec", "emergency", "rescue"}:
        return "'systemctl' would stop or restart the machine"
    if program.startswith("mkfs") or program in {"mke2fs", "mkswap", "wipefs"}:
        return f"'{program}' formats or wipes a filesystem"
    check = _PROGRAM_CHECKS.get(program)
    return check(args) if check else None


def _check_shell_invocation(program: str, args: list[str], *, depth: int) -> str | None:
    """``sh -c 'script'`` and ``eval`` run text as commands: check that text too."""
    if program == "eval":
        return _check(" ".join(args), depth=depth + 1)
    for index, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg and index + 1 < len(args):
            return _check(args[index + 1], depth=depth + 1)
    return None


def _operands(args: list[str]) -> tuple[list[str], list[str]]:
    """(options, operands) with ``--`` ending the options, as most coreutils do."""
    options: list[str] = []
    operands: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            operands.extend(args[index + 1 :])
            break
        (options if arg.startswith("-") and arg != "-" else operands).append(arg)
    return options, operands


def _is_recursive(options: list[str]) -> bool:
    return any(
        option == "--recursive" or (not option.startswith("--") and set(option[1:]) & {"r", "R"})
        for option in options
    )


def _protected(operand: str) -> bool:
    """``/``, ``/*``, ``//``, ``/usr/``, ``/.*``, ``~``, ``$HOME/*`` ... all name a protected tree."""
    path = re.sub(r"/+", "/", operand.replace("${HOME}", "~").replace("$HOME", "~"))
    path = path.removesuffix("*")
    return bool(path) and posixpath.normpath(path) in PROTECTED_PATHS


def _first_protected(operands: list[str]) -> str | None:
    return next((operand for operand in operands if _protected(operand)), None)


def _check_rm(args: list[str]) -> str | None:
    options, operands = _operands(args)
    if "--no-preserve-root" in options:
        return "'rm --no-preserve-root' would delete the whole filesystem"
    target = _first_protected(operands)
    if target is not None and _is_recursive(options):
        return f"'rm -r {target}' would delete a system or home folder"
    return None


def _check_permissions(program: str) -> Callable[[list[str]], str | None]:
    """chmod/chown/chgrp -R on a protected tree; their first operand is the mode or owner."""

    def check(args: list[str]) -> str | None:
        options, operands = _operands(args)
        target = _first_protected(operands[1:])
        if target is not None and _is_recursive(options):
            return f"'{program} -R' on {target} would break the system"
        return None

    return check


def _check_dd(args: list[str]) -> str | None:
    for arg in args:
        if arg.startswith("of=") and _is_raw_device(arg[3:]):
            return f"'dd' would overwrite the device {arg[3:]}"
    return None


def _check_device_writers(program: str) -> Callable[[list[str]], str | None]:
    """tee/cp/shred/... with a raw device operand write to the disk itself."""

    def check(args: list[str]) -> str | None:
        _, operands = _operands(args)
        device = next((operand for operand in operands if _is_raw_device(operand)), None)
        if device is not None:
            return f"'{program}' would write to the raw device {device}"
        return None

    return check


def _check_mv(args: list[str]) -> str | None:
    _, operands = _operands(args)
    target = _first_protected(operands[:-1])
    return f"'mv {target}' would move a system or home folder away" if target else None


def _check_find(args: list[str]) -> str | None:
    starts = [arg for arg in args if not arg.startswith("-")][:1]
    deletes = "-delete" in args or any(
        arg in {"-exec", "-execdir"} and posixpath.basename(args[i + 1]) == "rm"
        for i, arg in enumerate(args[:-1])
    )
    if deletes and starts and _protected(starts[0]):
        return f"'find {starts[0]} -delete' would delete a system or home folder"
    return None


def _check_kill(args: list[str]) -> str | None:
    """``kill -9 -1`` kills every process of the server's user, ``kill 1`` targets init."""
    if args[:1] in (["-s"], ["-n"]):
        args = args[2:]
    elif args and args[0].startswith("-") and args[0] != "--":
        args = args[1:]  # the signal
    targets = args[1:] if args[:1] == ["--"] else args
    if set(targets) & {"-1", "1"}:
        return "'kill' of every process (-1) or of init (1) would take the server down"
    return None


def _is_raw_device(path: str) -> bool:
    return path not in _HARMLESS_DEVICES and bool(_RAW_DEVICE.match(path))


_PROGRAM_CHECKS: dict[str, Callable[[list[str]], str | None]] = {
    "rm": _check_rm,
    "chmod": _check_permissions("chmod"),
    "chown": _check_permissions("chown"),
    "chgrp": _check_permissions("chgrp"),
    "dd": _check_dd,
    "tee": _check_device_writers("tee"),
    "cp": _check_device_writers("cp"),
    "shred": _check_device_writers("shred"),
    "mv": _check_mv,
    "find": _check_find,
    "kill": _check_kill,
}
