import io

from benchwatch.record.stream import LineSafeStream


def test_lines_said_mid_line_wait_for_the_newline():
    out = io.BytesIO()
    t = LineSafeStream(out)
    t.write(b"progress: 1.0 s, 12")
    t.say("benchwatch: ALERT FIRING X")
    assert out.getvalue() == b"progress: 1.0 s, 12"
    t.write(b"3.4 tps, lat 1.000 ms\nprogress: 2.0")
    assert out.getvalue() == b"progress: 1.0 s, 123.4 tps, lat 1.000 ms\nprogress: 2.0"
    t.write(b" s\n")
    assert out.getvalue().endswith(b"progress: 2.0 s\nbenchwatch: ALERT FIRING X\n")


def test_lines_said_between_lines_go_out_at_once_and_close_flushes():
    out = io.BytesIO()
    t = LineSafeStream(out)
    t.say("a")
    assert out.getvalue() == b"a\n"
    t.write(b"partial")
    t.say("b")
    t.close()
    assert out.getvalue() == b"a\npartial\nb\n"
