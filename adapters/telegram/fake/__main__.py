"""``python -m adapters.telegram.fake``: the fake Bot API in its own process (see ``runner``)."""

from adapters.telegram.fake.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
