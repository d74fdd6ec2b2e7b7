package jobs

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// TestWorkerLost: when a job's worker counts as lost (its job is then
// requeued or interrupted). A job of this very runner never does — River's
// retry dispatch of a long job can land on the worker still training it.
func TestWorkerLost(t *testing.T) {
	host, _ := os.Hostname()
	self := fmt.Sprintf("%s/%d/aaaaaa", host, os.Getpid())
	fresh, stale := time.Now(), time.Now().Add(-time.Hour)
	// A pid that is not running: the largest pid the kernel would hand out
	// is far below this.
	dead := fmt.Sprintf("%s/%d/bbbbbb", host, 1<<30)
	cases := []struct {
		name   string
		worker string
		hb     *time.Time
		lost   bool
	}{
		{"this runner, fresh heartbeat", self, &fresh, false},
		{"this runner, stale heartbeat", self, &stale, false},
		{"this pid, another identity (an earlier life)", fmt.Sprintf("%s/%d/cccccc", host, os.Getpid()), &fresh, true},
		{"this host, dead pid", dead, &fresh, true},
		{"this host, live pid (pid 1), fresh", host + "/1/dddddd", &fresh, false},
		{"other host, fresh heartbeat", "elsewhere/42/eeeeee", &fresh, false},
		{"other host, stale heartbeat", "elsewhere/42/eeeeee", &stale, true},
		{"other host, no heartbeat", "elsewhere/42/eeeeee", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := core.Job{Worker: c.worker, HeartbeatAt: c.hb}
			if got := workerLost(j, self, host, time.Minute); got != c.lost {
				t.Fatalf("workerLost(%s) = %v, want %v", c.worker, got, c.lost)
			}
		})
	}
}
