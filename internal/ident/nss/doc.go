// Package nss fits neural state-space models (SUBNET-style, Beintema,
// Tóth & Schoukens 2021) in units normalised by the training statistics:
//
//	x(t0)  = E φ(t0) + e0 + enc(φ(t0)),
//	x(k+1) = A x(k) + B u(k) + f(x(k), u(k)),
//	y(k)   = C x(k) + D u(k) + h(x(k), u(k)),
//
// φ(t0) the na past outputs and nb past inputs before the first simulated
// row t0 (the encoder), f, h and enc MLPs (internal/ident/mlp: tanh
// hidden layers, linear output) beside a linear part — the skip
// connection. With LinearInit the linear part starts as the subspace
// model (internal/ident/linear, optionally refined by prediction error),
// E and e0 as the least-squares map from φ to that model's simulated
// training states, and the networks' output layers at zero: at epoch 0
// the model is the linear model with a linear state estimator.
//
// Training minimises the free-run (simulation) error of subsequences of
// SeqLen steps tiling the training rows (a random offset per epoch, a
// shuffled order), each started from its own encoder state (multiple
// shooting), by Adam on minibatches, the gradient by back-propagation
// through the steps (tested against finite differences); LRLinear and
// LRTransition scale the step of the linear part (A, B, C, D, E, e0) and
// of the network f (mlp.Adam's Scale), so that a good subspace start is kept
// while the other networks learn (EMPS: bench/RESULTS.md). The
// subsequences of a minibatch are simulated on Workers goroutines into
// one gradient buffer each and summed in a fixed order, so the weights
// do not depend on the number of cores. The epoch kept is the one with
// the lowest free-run NRMSE on a held-out tail of every training segment
// (the initialisation, epoch 0, included): on that block the model is
// never worse than its start. With Select "record" the epoch is chosen
// instead on the free run over every whole training segment, started
// once from the encoder at its beginning (the tail is still kept out of
// the gradient): on a short record (cascaded tanks: 1024 samples, a
// 102-sample tail) the tail's figure said nothing of the test record
// (correlation 0.02 over 15 seeds) while the whole record's long free
// run — the error the 100-step subsequences never see, here through the
// overflow of the tanks — did (0.82); see bench/RESULTS.md. Training is deterministic for a seed on
// one machine (math/rand/v2 PCG from the seed) unless the time budget
// stops it.
//
// For the digital twin a model's free run comes in two parts (run.go): a
// Start made once from a measured window (Ensemble.StartFrom: every
// member's encoder state) and Runners, one per goroutine with their own
// buffers over members only read, that continue it over candidate inputs
// (Continue: the members' mean; ContinueSpread: and their standard
// deviation). Start then Continue performs the operations of
// Ensemble.Simulate in the same order, so it gives the same floats
// (TestContinueMatchesSimulate).
package nss
