"""``sessionctl completion bash|zsh``: a tab-completion script for the shell, from the parser itself.

Made with shtab, which turns the argparse parser into a static bash or zsh script: nouns,
verbs, flags and choices complete at once without starting Python, and the script cannot
drift from the parser because it is generated from it on every call. (argcomplete, the other
well-kept choice, starts the whole CLI on every TAB and hooks into every normal run.) The
ids are the one dynamic part: a sandbox id completes from ``sessionctl sandbox list -q`` and
a session id from ``sessionctl session list SB -q``, against the server the line names with
``--url`` (else ``SESSIOND_URL`` or the local default, with the local token file).

    source <(sessionctl completion bash)                       # bash, e.g. in ~/.bashrc
    sessionctl completion zsh > "${fpath[1]}/_sessionctl"      # zsh, then: compinit
"""
from __future__ import annotations

import argparse
import sys

SANDBOX_IDS = "_sessionctl_sandbox_ids"
SESSION_IDS = "_sessionctl_session_ids"

# The id lists, asked of the server the line names (its --url), quietly: a TAB never prints errors.
BASH = r"""
_sessionctl_server() {
  local i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --url|--token|--data-dir) printf '%s\n' "${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}" ;;
      --url=*|--token=*|--data-dir=*) printf '%s\n' "${COMP_WORDS[i]}" ;;
    esac
  done
}
_sessionctl_sandbox_ids() {
  local -a server
  mapfile -t server < <(_sessionctl_server)
  compgen -W "$(command sessionctl "${server[@]}" sandbox list -q 2>/dev/null)" -- "$1"
}
_sessionctl_session_ids() {
  local -a server
  local w sb=
  for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do case $w in sb-*) sb=$w ;; esac; done
  [ -n "$sb" ] || return 0
  mapfile -t server < <(_sessionctl_server)
  compgen -W "$(command sessionctl "${server[@]}" session list "$sb" -q 2>/dev/null)" -- "$1"
}
"""

ZSH = r"""
_sessionctl_server() {
  local i
  for ((i = 2; i < CURRENT; i++)); do
    case ${words[i]} in
      --url|--token|--data-dir) reply+=("${words[i]}" "${words[i+1]}") ;;
      --url=*|--token=*|--data-dir=*) reply+=("${words[i]}") ;;
    esac
  done
}
_sessionctl_sandbox_ids() {
  local -a reply ids
  _sessionctl_server
  ids=(${(f)"$(command sessionctl $reply sandbox list -q 2>/dev/null)"})
  compadd -a ids
}
_sessionctl_session_ids() {
  local -a reply ids
  local w sb
  for w in ${words[2,CURRENT-1]}; do [[ $w == sb-* ]] && sb=$w; done
  [[ -n $sb ]] || return 1
  _sessionctl_server
  ids=(${(f)"$(command sessionctl $reply session list $sb -q 2>/dev/null)"})
  compadd -a ids
}
"""


def register(nouns, common, formatter) -> None:
    completion = nouns.add_parser("completion", formatter_class=formatter, help="print a bash or zsh completion script",
                                  description=__doc__.split("\n\n")[0],
                                  epilog="examples:\n  source <(sessionctl completion bash)      # bash\n"
                                         '  sessionctl completion zsh > "${fpath[1]}/_sessionctl"   # zsh, before compinit')
    completion.set_defaults(handler=print_script, verb="completion", client_factory=no_client)
    completion.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete for")


class no_client:  # the script needs no server: a stand-in for the client main() opens
    def __init__(self, *_args, **_kwargs) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def tag_ids(parser: argparse.ArgumentParser) -> None:
    """Mark every sandbox-id and session-id argument of every verb with its id completer."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                tag_ids(sub)
        elif action.dest == "sandbox" and (not action.option_strings or "--sandbox" in action.option_strings):
            action.complete = {"bash": SANDBOX_IDS, "zsh": SANDBOX_IDS}  # type: ignore[attr-defined]
        elif action.dest == "session" and not action.option_strings:
            action.complete = {"bash": SESSION_IDS, "zsh": SESSION_IDS}  # type: ignore[attr-defined]


def print_script(_client, args) -> int:
    import shtab

    from .cli import build_parser  # the whole parser, as main() built it
    parser = build_parser(sys.modules["session_supervisor.client.cli"])
    tag_ids(parser)
    sys.stdout.write(shtab.complete(parser, args.shell, preamble={"bash": BASH, "zsh": ZSH}))
    return 0
