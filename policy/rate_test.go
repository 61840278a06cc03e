package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Rate
		wantErr string // substring; "" for success
	}{
		{in: "5/s", want: Rate{5, time.Second}},
		{in: "600/m", want: Rate{600, time.Minute}},
		{in: "1/h", want: Rate{1, time.Hour}},
		{in: "007/s", want: Rate{7, time.Second}},
		{in: "1000000/s", want: Rate{1_000_000, time.Second}},
		{in: "60000000/m", want: Rate{60_000_000, time.Minute}},
		{in: "5/x", wantErr: `"5/x" is not N/s, N/m, N/h or N/d`},
		{in: "5", wantErr: `"5" is not N/s`},
		{in: "/s", wantErr: `"/s" is not N/s`},
		{in: "5/", wantErr: `"5/" is not N/s`},
		{in: "", wantErr: `"" is not N/s`},
		{in: "-5/s", wantErr: `"-5/s" is not N/s`},
		{in: "+5/s", wantErr: `"+5/s" is not N/s`},
		{in: "5.5/s", wantErr: `"5.5/s" is not N/s`},
		{in: " 5/s", wantErr: `is not N/s`},
		{in: "5/S", wantErr: `is not N/s`},
		{in: "5/sec", wantErr: `is not N/s`},
		{in: "5/s/s", wantErr: `is not N/s`},
		{in: "0/s", wantErr: `"0/s": N must be positive`},
		{in: "99999999999999999999/s", wantErr: "is too large"},
		{in: "1000001/s", wantErr: "faster than 1000000/s"},
		{in: "60000001/m", wantErr: "faster than 1000000/s"},
	} {
		got, err := ParseRate(tc.in)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRate(%q) error = %v; want one containing %q and wrapping ErrInvalid", tc.in, err, tc.wantErr)
		}
	}
}

func TestRate_String(t *testing.T) {
	for _, tc := range []struct {
		r    Rate
		want string
	}{
		{Rate{5, time.Second}, "5/s"},
		{Rate{600, time.Minute}, "600/m"},
		{Rate{1, time.Hour}, "1/h"},
		{Rate{5, 10 * time.Second}, "5/10s"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.r, got, tc.want)
		}
		if back, err := ParseRate(tc.want); err == nil && back != tc.r {
			t.Errorf("ParseRate(%q) = %v, want %v", tc.want, back, tc.r)
		}
	}
}

func TestRate_Limit(t *testing.T) {
	l, err := Rate{5, time.Second}.Limit(3)
	if err != nil || l.Interval != 200_000_000 || l.Burst != 3 {
		t.Fatalf("5/s burst 3 = %+v, %v; want interval 200000000ns burst 3", l, err)
	}
	// 3/s does not divide a second evenly: rounded up to enforce below, never above.
	if l, _ := (Rate{3, time.Second}).Limit(1); l.Interval != 333_333_334 {
		t.Errorf("3/s interval = %d, want 333333334", l.Interval)
	}
	// The fastest rates keep their value within 0.1 %, not whole microseconds.
	if l, _ := (Rate{999_999, time.Second}).Limit(1); l.Interval != 1001 {
		t.Errorf("999999/s interval = %d, want 1001", l.Interval)
	}
}

func TestParseRate_day(t *testing.T) {
	r, err := ParseRate("100/d")
	if err != nil || r.Per != 24*time.Hour || r.N != 100 || r.String() != "100/d" {
		t.Fatalf("ParseRate(100/d) = %v, %v", r, err)
	}
}
