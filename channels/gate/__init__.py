"""The tool-call gate: which of the agent's tool calls run, need a person, or are blocked.

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
"""

__all__ = ["confinement", "policy"]
