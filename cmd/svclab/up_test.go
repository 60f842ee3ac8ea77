package main

import (
	"errors"
	"testing"
)

// TestUpFailureSaysWhy: a failed `up` says the cause its owner sent over the
// ready pipe, whatever its log holds (nothing, when the run directory was
// full), and the log's lines before the error as context, without saying the
// error twice; an owner that sent nothing is said to have ended so.
func TestUpFailureSaysWhy(t *testing.T) {
	full := "record lab web-abcd: write /run/svclab/web-abcd.json.7.tmp: no space left on device"
	for _, c := range []struct {
		name, out, log, want string
		waitErr              error
	}{
		{name: "log unwritable", out: failedLine + "\n" + full + "\n", log: "",
			want: "the lab did not come up: " + full},
		{name: "log readable", out: failedLine + "\nkube binary /bin/false: exit status 1\n",
			log:  "lab web-abcd: 2 nodes up\nsvclab: kube binary /bin/false: exit status 1 \n",
			want: "the lab did not come up: kube binary /bin/false: exit status 1\nits log:\nlab web-abcd: 2 nodes up"},
		{name: "crashed", out: "", log: "panic: boom\n", waitErr: errors.New("exit status 2"),
			want: "the lab did not come up: its process ended (exit status 2) without saying why\nits log:\npanic: boom"},
	} {
		if got := upFailure(c.out, c.waitErr, c.log).Error(); got != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}
