package integration

import (
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// TestMain removes the binaries the tests built (testkit.Build), which
// would otherwise stay in the temporary directory after every run.
func TestMain(m *testing.M) { testkit.Main(m) }
