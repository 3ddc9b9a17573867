package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// TestOutVoted: a member takes itself for dropped (and rejoins) when most
// of the other members of its cluster that answered within DeadAfter list
// its system id as blocked; not when one of several does (the member the
// others dropped blocks them too, often, when it runs again), nor on old
// answers, other clusters' or its own.
func TestOutVoted(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const deadAfter = 10 * time.Second
	type answer struct {
		cluster, id string
		blocked     []string
		age         time.Duration
	}
	fresh := func(id string, blocked ...string) answer { return answer{"c", id, blocked, time.Second} }
	tests := []struct {
		name     string
		answers  []answer
		out      bool
		wantLive int
	}{
		{"none answered", nil, false, 1},
		{"only itself", []answer{fresh("me", "me")}, false, 1},
		{"listed by no one", []answer{fresh("me"), fresh("a"), fresh("b")}, false, 3},
		{"dropped by both others", []answer{fresh("me", "a", "b"), fresh("a", "me"), fresh("b", "me")}, true, 3},
		{"blocked by the member they dropped", []answer{fresh("me"), fresh("a", "x"), fresh("x", "me", "a")}, false, 3},
		{"dropped by two of three", []answer{fresh("me"), fresh("a", "me"), fresh("b", "me"), fresh("c")}, true, 4},
		{"half is not most", []answer{fresh("a", "me"), fresh("b"), fresh("c", "me"), fresh("d")}, false, 5},
		{"two members that blocked each other", []answer{fresh("me", "a"), fresh("a", "me")}, true, 2},
		{"the one that answered dropped it", []answer{fresh("a", "me"), {"c", "b", nil, 11 * time.Second}}, true, 2},
		{"an old answer counts nothing", []answer{fresh("a"), {"c", "b", []string{"me"}, 11 * time.Second}}, false, 2},
		{"another cluster counts nothing", []answer{fresh("a"), {"other", "b", []string{"me"}, time.Second}}, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &healthProvider{name: "c", self: "me", deadAfter: deadAfter, nodes: map[string]healthSeen{}}
			for i, a := range tt.answers {
				p.nodes[string(rune('A'+i))] = healthSeen{
					node:    &automanaged.NodeModel{ClusterName: a.cluster, ID: a.id},
					blocked: a.blocked,
					at:      now.Add(-a.age),
				}
			}
			out, live := p.outVoted(now)
			assert.Equal(t, tt.out, out, "out voted")
			assert.Equal(t, tt.wantLive, live, "members that answered")
		})
	}
}
