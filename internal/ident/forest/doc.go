// Package forest fits random forests of CART trees to static (one row per
// cycle) data: classification by soft voting over the trees' leaf class
// probabilities, regression by the mean of the trees' leaf means.
//
//	f, err := forest.Fit(X, y, forest.DefaultOptions(forest.Classification))
//	class := f.Predict(x)
//	acc := f.OOB.Accuracy // out-of-bag estimate
//
// # Trees
//
// Every tree is grown on a bootstrap sample (Options.SampleFraction·n draws
// with replacement; without Options.Bootstrap, a subsample of that size
// without replacement, or all rows). At each node Options.MaxFeatures
// features are drawn without replacement (more are drawn while the drawn
// ones are constant on the node, as in scikit-learn) and the split
// x_f ≤ t maximising the impurity decrease is taken: weighted Gini for
// classification, weighted squared error for regression (the bootstrap
// counts are the weights). Options.Criterion selects information gain
// (entropy) or the gain ratio (gain over the split's own entropy, C4.5's;
// the published iGuzzini random forest's criterion) for classification
// instead; on iGuzzini neither beat Gini (bench/RESULTS.md). Thresholds are midpoints between consecutive
// distinct values. A node becomes a leaf at Options.MaxDepth, below
// Options.MinSplit rows, when it is pure, or when no split leaves
// Options.MinLeaf distinct rows on each side.
//
// # Speed
//
// The rows are sorted once per feature; each tree keeps, per feature, its
// in-bag rows in that order in one flat buffer, and every node is a range of
// it. A split partitions every feature's range stably in place (one scratch
// buffer per worker), so finding a split is a linear scan and nothing is
// allocated per node but the node itself. Trees are grown in parallel on
// Options.Workers goroutines (default runtime.GOMAXPROCS).
//
// # Determinism
//
// Tree t draws from its own PCG stream seeded by (Options.Seed, t), and the
// trees, the out-of-bag sums and the importances are combined in tree
// order, so a forest is bit-identical for a seed whatever the number of
// workers or cores.
//
// # Out-of-bag estimate and importances
//
// Each row is predicted by the trees whose sample left it out (OOB): the
// accuracy (classification) or R² and RMSE (regression) of those
// predictions over the rows left out by at least one tree estimates the
// generalisation error without a held-out set. Importances are the mean
// decrease in impurity per feature, summed over all splits of all trees and
// normalised to sum 1.
//
// # Tuning
//
// [Tune] grows a forest at every point of the declared grid [TuneGrid]
// (mtry ⌊√d⌋, ⌊d/3⌋, ⌈d/2⌉ × min leaf 1, 2, 4 × bootstrap of n rows or a
// subsample of 0.632·n rows without replacement; 18 points for d = 13) on
// the rows it is given and keeps the one of best out-of-bag accuracy
// (classification) or squared error (regression), the earlier point on a
// tie. The kept forest is the final model (its out-of-bag rows were the
// selection set; there is no refit). It sees only the rows passed to it,
// so in a cross-validation the held-out fold cannot steer the choice. The
// grid was written down before the iGuzzini outer folds were scored with
// it (examples/bench/iguzzini_tuned.json) and must not be widened by
// looking at those scores.
//
// [TuneCV] (regression: an ordinal class predicted as a number and
// rounded) chooses by a 2 × 5-fold stratified inner cross-validation on the
// rows it is given instead of out-of-bag scores: every point of the
// declared grid [CVGrid] (8 regression forests of CVInnerTrees trees; 4
// gradient-boosted settings whose rounds, 25..1000, are picked on the inner
// folds) is scored by the accuracy of its rounded out-of-fold predictions
// (ties: lower squared error, then the earlier point); the best forest and
// the best boosted model are blended as w·forest + (1−w)·boost with w from
// [CVBlendWeights] (1, 0.9, …, 0) fitted on the same out-of-fold
// predictions, and the chosen models are refitted on all the rows. A blend
// is a Forest of Method "blend" (Parts, Weights); w = 1 or 0 returns the
// forest or the boosted model alone. Like Tune it sees only the rows passed
// to it, and CVGrid was committed before any iGuzzini outer fold was
// scored with it (examples/bench/iguzzini_cv.json). With cuts, TuneCV also
// fits the class cut points on the chosen model's inner out-of-fold
// predictions ([FitCuts]); the model (Forest.Cuts, CutLabels) then predicts
// the class label between them (examples/bench/iguzzini_cv_cuts.json,
// declared before it was scored).
//
// [TuneCVGrid] runs the same selection over a named declared grid: GridCV1
// is CVGrid (TuneCV), GridCV2 is [CVGrid2] — CVGrid's forests, extremely
// randomised regression trees and ordinal forests, then CVGrid's boosted
// trees (20 points for d = 13). Over CVGrid2 the best random or extra
// forest is blended with the best boosted model, and the best ordinal
// forest replaces the blend when its inner accuracy is strictly higher.
// CVGrid2 was committed with examples/bench/iguzzini_cv2.json before any
// outer fold was scored with it.
//
// # Extremely randomised trees
//
// [ExtraOptions] grows extremely randomised trees (Geurts, Ernst and
// Wehenkel 2006): every tree on all rows (no bootstrap), each tried
// feature split at one threshold drawn uniformly in its range on the node
// (Options.RandomSplits), the best of those taken; mtry ⌊√d⌋ for
// classification, d for regression. With every row in every tree there is
// no out-of-bag estimate: a cross-validation (TuneCVGrid's inner one, or
// the benchmark's) is the estimate.
//
// # Ordinal forests
//
// [FitOrdinal] fits ordered class labels c_0 < … < c_{K−1} as K−1
// regression (probability) forests, part k on the 0/1 target 1{y > c_k};
// the class probabilities they imply, P(c_0) = 1 − P(y > c_0),
// P(c_k) = P(y > c_{k−1}) − P(y > c_k), P(c_{K−1}) = P(y > c_{K−2}) (each
// estimate clipped to [0, 1]), are argmaxed (Forest.Method "ordinal",
// Task classification, Classes the labels, Parts the K−1 forests).
//
// # Gradient boosting
//
// [Boost] fits gradient-boosted regression trees on the squared error with
// the same tree grower: each round fits a depth-limited tree to the current
// residuals on a subsample drawn without replacement, and the model predicts
// Init + LearningRate·Σ_t tree_t(x) (Forest.Method "boost"). Rounds are
// sequential (one core) and there is no out-of-bag estimate.
//
// # Model file
//
// A Forest marshals to JSON (Version 1): per tree, parallel node arrays
// (feature, threshold, left, right; feature −1 marks a leaf) and the leaf
// values (class probabilities, K per node, or one mean per node). [Parse]
// reads and validates it: children must come after their parent, so a
// parsed forest always terminates. A blend holds its parts (forests or
// boosted models, not blends) and their weights (≥ 0, summing to 1); an
// ordinal forest its K−1 regression forests and K classes.
package forest
