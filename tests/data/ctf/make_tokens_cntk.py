"""Record how the real CNTK 2.7 reads single CTF number tokens: tokens_cntk.json.

Run under CNTK 2.7's Python (cntk==2.7.post1 needs Python 3.6):
``python tests/data/ctf/make_tokens_cntk.py tests/data/ctf/tokens_cntk.json``. Each token gets a
file ``0 |F <token> 2`` read as a dense stream of dimension 2 through CNTK's CTFDeserializer; the
JSON maps the token to the float32 bits of the sample CNTK gives, or to "refused" when CNTK
refuses the file. tests/test_ctf.py reads the same files with recio and compares.
"""
import json
import os
import sys
import tempfile

import numpy as np

#: overflow, subnormals, underflow, rounding ties, long digit strings, signs and what CNTK refuses
TOKENS = [
    "0", "1", "-1", "007", "+1.5", "1.", "1.e3", "3.4028234e38", "3.4028235e38", "3.40282357e38",
    "3.4028236e38", "1e39", "-1e39", "1e308", "1e309", "1e-38", "1.17549435e-38", "1e-40",
    "1.4e-45", "7e-46", "7.1e-46", "1e-50", "123456789012345678901234567890",
    "0.000000000000000000000000000000000000000001", "1E5", "1e+5", "1e-5",
    "9.999999999999999999e-1", "0.1", "0.2", "0.3", "16777217", "16777219", "33554435",
    "2.5000000000000001", "1.00000005960464477539062", "1.0000000596046447753906250001",
    "1.00000011920928955078125", "3.14159265358979323846264338327950288", "-0.5e-0", "5e00",
    "1e0010", "0.0000001e7", "12345678901234567890e-15", "4.9406564584124654e-324",
    "2.2250738585072011e-308", "1" + "0" * 400, "0." + "0" * 400 + "1", "1e", "1e+", "--1",
    "1.5.5", "0x10", ".5", "-.5", "inf", "nan", "1e-400", "1e400", "-0", "0e0", "1.0e-7",
    "8.589973e9", "4.35e-12", "0.6931471805599453", "1.7976931348623157e308",
    "100000000000000000000000000000000000001e-38",
    "1.000000000000000000000000000000000000000000000000000000000001", "9007199254740993",
    "0.1000000000000000055511151231257827", "5.877471754111438e-39", "1.1754942e-38"]


def token_file(folder, i, token):
    path = os.path.join(folder, "t%d.ctf" % i)
    with open(path, "w") as f:
        f.write("0 |F %s 2\n" % token)
    return path


def main():
    import cntk.io as C

    out = {}
    folder = tempfile.mkdtemp()
    for i, token in enumerate(TOKENS):
        path = token_file(folder, i, token)
        try:
            source = C.MinibatchSource(C.CTFDeserializer(path, C.StreamDefs(
                f=C.StreamDef(field="F", shape=2))), randomize=False, max_sweeps=1)
            mb = source.next_minibatch(10)
            values = np.asarray(mb[source.streams.f].as_sequences()[0], np.float32)
            del mb
            out[token] = values.reshape(-1).view(np.uint32).tolist()
        except Exception:  # CNTK refuses the file (RuntimeError from its C++ reader)
            out[token] = "refused"
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=0)


if __name__ == "__main__":
    main()
