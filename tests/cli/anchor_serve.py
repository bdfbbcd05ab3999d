"""bench/anchor_common.serve, the lockstep protocol the tessera command drives: {"ready": true}
before anything is read (the command starts timing only after it), then for each "<case>
<threads>" line the rows and {"done": true}. Argument: the bench/ folder."""
import contextlib
import io
import json
import sys

sys.path.insert(0, sys.argv[1])
import anchor_common  # noqa: E402  (after the path: it sits beside the scripts)


class Stdin(io.StringIO):
    """Records what had been printed when the first request was read."""

    def __init__(self, text, out):
        super().__init__(text)
        self.out, self.printed_before_reading = out, None

    def __iter__(self):
        if self.printed_before_reading is None:
            self.printed_before_reading = self.out.getvalue()
        return super().__iter__()


out = io.StringIO()
sys.stdin = Stdin("sum/x 1\nbad line here\nmax/y 2\n", out)
with contextlib.redirect_stdout(out):
    anchor_common.serve(lambda case, threads: [{"case": case, "threads": threads}])
lines = [json.loads(line) for line in out.getvalue().splitlines()]
assert json.loads(sys.stdin.printed_before_reading) == {"ready": True}, sys.stdin.printed_before_reading
assert lines == [{"ready": True}, {"case": "sum/x", "threads": 1}, {"done": True},
                 {"case": "max/y", "threads": 2}, {"done": True}], lines
print("serve ok")
