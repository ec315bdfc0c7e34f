"""Solutions to lectures/exercises/lecture_06.py."""



def update_sizes(num_envs, num_steps, num_minibatches, update_epochs, total_timesteps):
    batch_size = num_envs * num_steps
    num_iterations = total_timesteps // batch_size
    return {"batch_size": batch_size, "minibatch_size": batch_size // num_minibatches,
            "num_iterations": num_iterations, "gradient_steps": num_iterations * update_epochs * num_minibatches}


def learning_rate(initial, iterations_done, iterations):
    return initial * (1.0 - iterations_done / iterations)


def finished_episode_returns(rewards, dones, running):
    running = running.clone()
    finished = []
    for t in range(rewards.shape[0]):
        running += rewards[t]
        finished += running[dones[t]].tolist()
        running[dones[t]] = 0.0
    return finished, running
