"""The tool-call gate: which of the agent's tool calls run, need a person, or are blocked.

commands    a bash command line as simple commands with their words (quotes, operators,
            substitutions, here-documents, redirections), never raising
wrappers    what each simple command really runs: `sudo`, `env`, `sh -c`, `python -c`, ...
paths       a tool's path as the file it names (cwd, `~`, `..`, symbolic links)
guard       what the model may never do (answer, cancel or tamper with decisions or state)
rules       the policy's bash and path patterns
policy      `judge`, the one entry point
"""
