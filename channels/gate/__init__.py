"""The tool-call gate: which of the agent's tool calls run, need a person, or are blocked.

The whole gate, in the order a call meets it:

    channels/config/gate.py   the policy: gate.json read and checked (GatePolicy), written by
                              `piw-channels gate on|off`; reread only when the file changes
    channels/gate/            the judgement: the guard, then the policy (`judge` -> Judgement,
                              pure), and for Pi the sandbox its bash runs in; `judging` reads
                              the policy and the protected set and judges one call, for every
                              agent (with Pi's sandbox probe: its Confinement too)
    channels/pi/gating.py     a gated call as a decision: its subject (the exact input), card,
                              choices and what the agent is told (GatedCall, outcome_text)
    channels/pi/gate_decisions.py  the decision for any agent: a session's grant, the card
                              opened, what the agent is told
    adapters/pi/gatedesk.py   Pi's bridge: judge, ask, hold the run until the answer, the
                              Confinement sent to the extension
    adapters/agents/          Claude Code, Codex and MCP clients: the same judgement without a
                              sandbox (approvals), their hook contracts (hooks, hook_run)

In this package:

commands    a bash command line as simple commands with their words (quotes, operators,
            substitutions, here-documents, redirections), never raising
wrappers    what each simple command really runs: `sudo`, `env`, `sh -c`, `python -c`, ...
walk        everything a command line runs, flattened, in the directory it runs in
paths       a tool's path as the file it names (cwd, `~`, `..`, symbolic links)
protected   what the guard protects (files, directories, processes)
programs    the guard's rules on program names and arguments
guard       what the model may never do (answer, cancel or tamper with decisions or state)
rules       the policy's bash and path patterns
verdict     the Judgement;  policy: `judge`, the one entry point
sandbox     the sandbox the agent's bash runs in: its mounts and bubblewrap's arguments
confinement where one call runs: the probe, the bubblewrap argv, the fence for Pi's own tools
judging     one call judged from the files: policy, protected set, guard, policy, confinement
"""

__all__ = ["confinement", "judging", "policy"]
