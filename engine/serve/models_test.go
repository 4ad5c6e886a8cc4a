package serve

import (
	"encoding/json"
	"net/http"
	"testing"

	"agentrl/engine/rollout"
)

// TestModelsMaxModelLen: GET /v1/models and /v1/models/{id} report a trajectory's context as
// max_model_len, as vLLM does — the slot less one token, or --max-total-tokens when smaller — so
// that a client (prm.endpoint's judge) can fit its lengths to it.
func TestModelsMaxModelLen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxTotal int
		want     int
	}{
		{"the slot", 0, 255},
		{"max_total_tokens below it", 200, 200},
		{"max_total_tokens above it", 1000, 255},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, base := newServer(t, rollout.Config{Slots: 1, MaxLen: 256}, Options{MaxTotalTokens: tc.maxTotal})
			key := s.Begin("models", TrajectoryOptions{})
			defer s.Finish(key) //nolint:errcheck // the slot is all that matters
			var list struct {
				Data []modelObject `json:"data"`
			}
			var one modelObject
			for path, v := range map[string]any{"/models": &list, "/models/builtin": &one} {
				req, _ := http.NewRequest(http.MethodGet, base+path, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				err = json.NewDecoder(resp.Body).Decode(v)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
				}
			}
			if len(list.Data) != 1 || list.Data[0].MaxModelLen != tc.want || one.MaxModelLen != tc.want {
				t.Errorf("max_model_len %+v and %d; want %d", list.Data, one.MaxModelLen, tc.want)
			}
		})
	}
}
