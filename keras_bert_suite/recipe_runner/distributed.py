"""What both runners do first: set up the recipe's distribution (training/distribution.py)."""


def start_distribution(recipe, log):
    """The recipe's Distribution (first thing in a run: devices are set up before TF starts)
    and the global batch size and precision it implies."""
    from keras_bert_suite.training.distribution import create_distribution

    distribution = create_distribution(recipe["distribution"])
    training = recipe["training"]
    batch_size = distribution.global_batch_size(training["batch_size"],
                                                training["per_replica_batch_size"])
    precision = training["precision"]
    if precision == "auto":
        precision = distribution.default_precision
    if distribution.strategy != "none":
        log(f"{distribution.describe()}; global batch {batch_size} "
            f"({batch_size // distribution.num_replicas} per replica), {precision}")
    return distribution, batch_size, precision
