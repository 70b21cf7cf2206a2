package pilaf_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/internal/remotedev"
)

func TestMain(m *testing.M) { remotedev.TestMain(m) }
