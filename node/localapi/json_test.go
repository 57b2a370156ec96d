package localapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// request is a request body with the shapes JSON decoding has to handle.
type request struct {
	Kind  string            `json:"kind"`
	Nodes []string          `json:"nodes,omitempty"`
	Delay int64             `json:"delay_ns,omitempty"`
	Loss  *float64          `json:"loss,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
	Inner *struct {
		On bool `json:"on"`
	} `json:"inner,omitempty"`
}

func TestReadJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // the error, "" for none
	}{
		{`{"kind":"crash","nodes":["n1"]}`, ""},
		{" {\"kind\":\"crash\"}\n\t ", ""},
		{`{"kind":"` + strings.Repeat("x", 21) + `"}`, ""}, // 32 bytes: the limit
		{`{"kind":"` + strings.Repeat("x", 22) + `"}`, "body larger than 32 bytes"},
		{``, "body is empty"},
		{" \n", "body is empty"},
		{`{"kind":"crash","node":"n1"}`, `json: unknown field "node"`},
		{`{"inner":{"off":true}}`, `json: unknown field "off"`},
		{`{"kind":1}`, "json: cannot unmarshal number into Go struct field request.kind of type string"},
		{`{"kind":"crash"`, "unexpected EOF"},
		{`{"kind":"a"}{"kind":"b"}`, "body holds more than one JSON value"},
		{`{"kind":"a"} x`, "body holds more than one JSON value"},
		{`nul`, "unexpected EOF"},
	} {
		var r request
		err := ReadJSON(strings.NewReader(tc.body), 32, &r)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ReadJSON(%q) = %v", tc.body, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("ReadJSON(%q) = %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusBadRequest, `fault: "x" refused`)
	if w.Code != http.StatusBadRequest || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != `{"error":"fault: \"x\" refused"}`+"\n" {
		t.Errorf("answer %d %q %q", w.Code, w.Header(), w.Body)
	}
}

// FuzzReadJSON: any body decodes, or fails with one line; what decodes was
// at most the limit, encodes and decodes again to the same request, and
// decodes no more with anything but white space after it.
func FuzzReadJSON(f *testing.F) {
	const limit = 512
	f.Add([]byte(`{"kind":"partition","nodes":["n1","n2"],"delay_ns":5000000,"loss":0.5,"tags":{"a":"b"},"inner":{"on":true}}`))
	f.Add([]byte(`{"kind":"crash"}` + "\n"))
	f.Add([]byte(`{"kind":"crash","extra":1}`))
	f.Add([]byte(`{"kind":"a"}{"kind":"b"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`"\u2028\ud800"`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var r request
		err := ReadJSON(strings.NewReader(string(data)), limit, &r)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") || len(msg) > 1024 {
				t.Fatalf("error not one short line: %q", msg)
			}
			return
		}
		if len(data) > limit {
			t.Fatalf("decoded %d bytes, over the limit of %d", len(data), limit)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("decoded request does not encode: %v", err)
		}
		var r2 request
		if err := ReadJSON(strings.NewReader(string(again)), int64(len(again)), &r2); err != nil {
			t.Fatalf("re-encoded request %s does not decode: %v", again, err)
		}
		// Compared encoded: an empty list and none encode alike.
		if again2, _ := json.Marshal(r2); !bytes.Equal(again, again2) {
			t.Fatalf("round trip changed %s to %s", again, again2)
		}
		if err := ReadJSON(strings.NewReader(string(data)+" {}"), limit+3, &r2); err == nil {
			t.Fatalf("%q with a second value after it decodes", data)
		}
	})
}
