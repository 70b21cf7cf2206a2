package memnode

import (
	"strings"
	"testing"
)

func TestAdmitOnly(t *testing.T) {
	if err := AdmitOnly("farm", "farm"); err != nil {
		t.Fatal(err)
	}
	err := AdmitOnly("farm", "prism-tx")
	if err == nil || !strings.Contains(err.Error(), `serves farm, not "prism-tx"`) {
		t.Fatalf("AdmitOnly of another service: %v", err)
	}
}
